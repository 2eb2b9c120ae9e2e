# mutant: every tick adds a second exchange that acknowledges the state messages: right answers, but two messages
# per tick where the state message with its round number already is the acknowledgement
# loses: traffic_lossless, traffic_lossy
REPLACE = [("        live -= closed\n",
            "        for p in sorted(live):\n            link.send(np.ones(1, np.int64), p)\n"
            "        for p in sorted(live):\n            try:\n                link.recv(p)\n"
            "            except cluster.MessageLostError:\n                pass\n        live -= closed\n")]

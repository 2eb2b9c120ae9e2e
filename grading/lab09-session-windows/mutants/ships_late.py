# mutant: late events are shipped to their key's owner, which drops them there: the right sessions and count
# for frames larger than needed
# loses: frames
# says: late events are dropped before the send
REPLACE = [("        frames = [pack_frame(mine, t_i[on_time & (owner == d)], k_i[on_time & (owner == d)],\n"
            "                             v_i[on_time & (owner == d)]) for d in range(K)]",
            "        frames = [pack_frame(mine, t_i[owner == d], k_i[owner == d], v_i[owner == d]) for d in range(K)]"),
           ("            for t, k, v in zip(ts.tolist(), ks.tolist(), vs.tolist()):\n",
            "            for t, k, v in zip(ts.tolist(), ks.tolist(), vs.tolist()):\n                if t < prev:\n"
            "                    continue\n"),
           ("        marks = []\n", "        marks, prev = [], mark\n")]

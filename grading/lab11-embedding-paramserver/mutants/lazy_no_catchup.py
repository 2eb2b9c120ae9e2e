# mutant: "lazy" momentum that never catches up: a row moves only when it is pushed (TensorFlow's LazyAdam style),
# so a row outside the batch stops where its last push left it instead of moving by its decayed velocity
# loses: final_rows, pulls_current, migration, sparse, correct_process
# says: the lab asks for heavy-ball momentum
REPLACE = [("        loc = loc[st[\"last\"][loc] < step]\n        while len(loc):",
            "        loc = loc[:0]\n        while len(loc):")]

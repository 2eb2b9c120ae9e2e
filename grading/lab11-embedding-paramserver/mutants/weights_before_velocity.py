# mutant: the weights move by the old velocity, then the velocity takes the gradient (w -= lr v; v = mu v + g)
# loses: final_rows, pulls_current, migration, sparse, correct_process
# says: the lab asks for heavy-ball momentum
REPLACE = [("            st[\"v\"][loc] = mu * st[\"v\"][loc] + g\n"
             "            st[\"w\"][loc] = st[\"w\"][loc] - lr * st[\"v\"][loc]\n",
             "            st[\"w\"][loc] = st[\"w\"][loc] - lr * st[\"v\"][loc]\n"
             "            st[\"v\"][loc] = mu * st[\"v\"][loc] + g\n")]

# mutant: the old servers hand on the moved rows' values but zero velocities: the moved rows lose their momentum
# loses: migration, final_rows, pulls_current, correct_process
# says: carries its momentum
REPLACE = [("wv = np.hstack([st[\"w\"][loc], st[\"v\"][loc]])", "wv = np.hstack([st[\"w\"][loc], 0 * st[\"v\"][loc]])")]

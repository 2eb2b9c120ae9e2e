# mutant: right outputs, but the expert id of every row travels in an extra all-to-all of tags (as in the
# course's capacity layer), although the summary already says how many rows each expert gets
# loses: traffic
# says: no tags
REPLACE = [
    ('received = all_to_all(comm, [tokens[tok[dest == j]] for j in range(size)])',
     'received = all_to_all(comm, [tokens[tok[dest == j]] for j in range(size)])\n'
     '    all_to_all(comm, [exp[dest == j] for j in range(size)])'),
]

# mutant: sorts and splits keys by their text (str(key)), which avoids comparing int with str but puts 10
#   before 9 and ints among strs
# loses: sorted, correct_process
# says: are not sorted
def order(key):
    return str(key)

# mutant: Adam's bias correction uses step t + 1
# loses: master_sim, master_process, weights_sim, weights_process, memory, int8_wire, bytes, own_code
# says: master shard
REPLACE = [("m_hat = state[\"m\"] / (1 - b1 ** t)", "m_hat = state[\"m\"] / (1 - b1 ** (t + 1))"),
           ("v_hat = state[\"v\"] / (1 - b2 ** t)", "v_hat = state[\"v\"] / (1 - b2 ** (t + 1))")]

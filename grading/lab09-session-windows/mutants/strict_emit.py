# mutant: a session is emitted only once the watermark is strictly past its end (end < W)
# loses: emitted_at, interleavings, edge_cases
# says: passed their end
REPLACE = [("            final = sorted(s for s in open_sessions[k] if s[1] <= mark)\n"
            "            open_sessions[k] = [s for s in open_sessions[k] if s[1] > mark]",
            "            final = sorted(s for s in open_sessions[k] if s[1] < mark)\n"
            "            open_sessions[k] = [s for s in open_sessions[k] if s[1] >= mark]")]

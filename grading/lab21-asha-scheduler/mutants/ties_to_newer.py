# mutant: ties at a rung go to the newer trial
# loses: decisions, jobs, driver, protocol
REPLACE = [("return sorted(at, key=lambda trial: (-at[trial], trial))", "return sorted(at, key=lambda trial: (-at[trial], -trial))")]

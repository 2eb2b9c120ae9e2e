# mutant: a pair is verified only when J is strictly above the threshold
# loses: verified
REPLACE = [("if (common / either if either else 1.0) >= threshold:", "if (common / either if either else 1.0) > threshold:")]

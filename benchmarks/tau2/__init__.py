"""tau2-bench (sierra-research/tau2-bench): airline and retail with the official tools, user simulator and reward."""

"""What the benchmarks share: callgrind runs, CPU burners, simulated providers, result headers."""

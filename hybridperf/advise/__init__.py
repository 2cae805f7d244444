"""What limits a kernel and what a change could gain: GPUPerf benefits and GPA estimates."""

package kuberuntime

import "time"

// Back-off figures the kubelet uses for crash loops and image pulls.
const (
	backOffInitial = 10 * time.Second
	backOffMax     = 5 * time.Minute
	// backOffReset: an entry untouched for this long (the container ran that long without another
	// failure) starts again from backOffInitial.
	backOffReset = 2 * backOffMax
)

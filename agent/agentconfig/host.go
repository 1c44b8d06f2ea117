package agentconfig

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"

	"github.com/nodelet/nodelet/internal/cgroupfs"
)

// checkHost refuses a host the configuration says not to run on (failSwapOn, failCgroupV1).
func checkHost(c *Config) error {
	var errs []error
	if *c.Kubelet.FailSwapOn {
		on, err := swapOn("/proc/swaps")
		if err != nil {
			errs = append(errs, fmt.Errorf("failSwapOn: %w", err))
		} else if on {
			errs = append(errs, errors.New("failSwapOn: swap is on (turn it off with swapoff -a, or set failSwapOn: false)"))
		}
	}
	if *c.Kubelet.FailCgroupV1 {
		if !cgroupfs.Host().Unified() {
			errs = append(errs, errors.New("failCgroupV1: this host uses cgroup v1 (set failCgroupV1: false to run on it)"))
		}
	}
	return errors.Join(errs...)
}

// swapOn reads /proc/swaps: a header line, then one line per active swap area.
func swapOn(path string) (bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return false, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	n := 0
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) > 0 {
			n++
		}
	}
	return n > 1, sc.Err()
}

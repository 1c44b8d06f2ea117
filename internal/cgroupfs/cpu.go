package cgroupfs

import (
	"fmt"
	"path/filepath"
	"time"
)

// userHZ is the unit of v1's cpuacct.stat: the kernel reports it in USER_HZ ticks, 100 a second
// on every architecture Linux exports to user space.
const userHZ = 100

// CPUStat is what a cgroup's CPU controller says beyond its total usage.
type CPUStat struct {
	UserNanos, SystemNanos uint64
	// The CFS bandwidth figures, 0 without a quota: periods run, periods throttled, and the
	// time throttled.
	Periods, ThrottledPeriods, ThrottledNanos uint64
}

// CPUStat reads the user and system time (v1 cpuacct.stat, v2 cpu.stat) and the throttling
// (cpu.stat) of the cgroup at path.
func (f FS) CPUStat(path string) (CPUStat, error) {
	var s CPUStat
	if f.Unified() {
		kv, err := readKV(filepath.Join(f.Dir("cpu", path), "cpu.stat"))
		if err != nil {
			return s, err
		}
		us := uint64(time.Microsecond)
		s.UserNanos, s.SystemNanos = kv["user_usec"]*us, kv["system_usec"]*us
		s.Periods, s.ThrottledPeriods, s.ThrottledNanos = kv["nr_periods"], kv["nr_throttled"], kv["throttled_usec"]*us
		return s, nil
	}
	acct, err := readKV(filepath.Join(f.Dir("cpuacct", path), "cpuacct.stat"))
	if err != nil {
		return s, err
	}
	user, okU := acct["user"]
	system, okS := acct["system"]
	if !okU || !okS {
		return s, fmt.Errorf("cgroup %s: cpuacct.stat lacks user or system", path)
	}
	tick := uint64(time.Second / userHZ)
	s.UserNanos, s.SystemNanos = user*tick, system*tick
	// The bandwidth figures live with the cpu controller; a cgroup without them was never limited.
	if kv, err := readKV(filepath.Join(f.Dir("cpu", path), "cpu.stat")); err == nil {
		s.Periods, s.ThrottledPeriods, s.ThrottledNanos = kv["nr_periods"], kv["nr_throttled"], kv["throttled_time"]
	}
	return s, nil
}

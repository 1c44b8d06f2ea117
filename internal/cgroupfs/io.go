package cgroupfs

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// IOStat is one block device's I/O done by a cgroup (and the cgroups below it).
type IOStat struct {
	Major, Minor          uint64
	ReadBytes, WriteBytes uint64
	Reads, Writes         uint64
}

// IO is the cgroup's block I/O by device, sorted by device: v2 io.stat; v1 the blkio throttle
// counters (recursive where the kernel has them), which count every request whatever the I/O
// scheduler, as cAdvisor falls back to them.
func (f FS) IO(path string) ([]IOStat, error) {
	if f.Unified() {
		return readIOStat(filepath.Join(f.Dir("io", path), "io.stat"))
	}
	dir := f.Dir("blkio", path)
	bytesFile, opsFile := "blkio.throttle.io_service_bytes_recursive", "blkio.throttle.io_serviced_recursive"
	if _, err := os.Stat(filepath.Join(dir, bytesFile)); err != nil {
		bytesFile, opsFile = "blkio.throttle.io_service_bytes", "blkio.throttle.io_serviced"
	}
	devs := map[[2]uint64]*IOStat{}
	for _, file := range []string{bytesFile, opsFile} {
		ops := file == opsFile
		err := readBlkio(filepath.Join(dir, file), func(major, minor uint64, op string, v uint64) {
			k := [2]uint64{major, minor}
			s := devs[k]
			if s == nil {
				s = &IOStat{Major: major, Minor: minor}
				devs[k] = s
			}
			switch {
			case op == "Read" && !ops:
				s.ReadBytes = v
			case op == "Write" && !ops:
				s.WriteBytes = v
			case op == "Read":
				s.Reads = v
			case op == "Write":
				s.Writes = v
			}
		})
		if err != nil {
			return nil, err
		}
	}
	return sorted(devs), nil
}

func sorted(devs map[[2]uint64]*IOStat) []IOStat {
	out := make([]IOStat, 0, len(devs))
	for _, s := range devs {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Major != out[j].Major {
			return out[i].Major < out[j].Major
		}
		return out[i].Minor < out[j].Minor
	})
	return out
}

// readIOStat reads v2 io.stat: "MAJ:MIN rbytes=N wbytes=N rios=N wios=N dbytes=N dios=N".
func readIOStat(p string) ([]IOStat, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	devs := map[[2]uint64]*IOStat{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		major, minor, err := parseDevice(fields[0])
		if err != nil {
			continue
		}
		s := &IOStat{Major: major, Minor: minor}
		for _, kv := range fields[1:] {
			k, v, ok := strings.Cut(kv, "=")
			n, err := strconv.ParseUint(v, 10, 64)
			if !ok || err != nil {
				continue
			}
			switch k {
			case "rbytes":
				s.ReadBytes = n
			case "wbytes":
				s.WriteBytes = n
			case "rios":
				s.Reads = n
			case "wios":
				s.Writes = n
			}
		}
		devs[[2]uint64{major, minor}] = s
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return sorted(devs), nil
}

// readBlkio reads a v1 blkio counter file: "MAJ:MIN Op N" lines and a last "Total N".
func readBlkio(p string, each func(major, minor uint64, op string, v uint64)) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 {
			continue
		}
		major, minor, err := parseDevice(fields[0])
		if err != nil {
			continue
		}
		v, err := strconv.ParseUint(fields[2], 10, 64)
		if err != nil {
			continue
		}
		each(major, minor, fields[1], v)
	}
	return sc.Err()
}

func parseDevice(s string) (major, minor uint64, err error) {
	a, b, ok := strings.Cut(s, ":")
	if !ok {
		return 0, 0, fmt.Errorf("device %q", s)
	}
	if major, err = strconv.ParseUint(a, 10, 32); err != nil {
		return 0, 0, err
	}
	minor, err = strconv.ParseUint(b, 10, 32)
	return major, minor, err
}

// maxProcs bounds one cgroup's process list: a cgroup is capped by pids.max well below this.
const maxProcs = 1 << 20

// Procs are the processes in the cgroup itself (cgroup.procs; not those of the cgroups below).
func (f FS) Procs(path string) ([]int, error) {
	b, err := os.ReadFile(filepath.Join(f.Dir("memory", path), "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	var out []int
	for _, line := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(line)
		if err != nil {
			continue
		}
		if len(out) == maxProcs {
			return out, errors.New("too many processes")
		}
		out = append(out, pid)
	}
	return out, nil
}

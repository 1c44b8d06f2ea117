// Package eviction is the agent's eviction manager, after the kubelet's: it measures the node's
// pressure signals, reports MemoryPressure/DiskPressure/PIDPressure, refuses new pods under
// pressure, and when a threshold is met reclaims node-level resources and then evicts pods, one per
// pass, ranked as the kubelet ranks them. It sees pods' usage only through CRI stats.
package eviction

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Signal names a measured quantity thresholds compare against, spelt as in the kubelet's flags.
type Signal string

const (
	SignalMemoryAvailable   Signal = "memory.available"
	SignalNodeFsAvailable   Signal = "nodefs.available"
	SignalNodeFsInodesFree  Signal = "nodefs.inodesFree"
	SignalImageFsAvailable  Signal = "imagefs.available"
	SignalImageFsInodesFree Signal = "imagefs.inodesFree"
	SignalPIDAvailable      Signal = "pid.available"
	// SignalAllocatableMemoryAvailable is the pods' cgroup (kubepods) memory limit less its
	// working set: pods running out of the memory allocated to them, before the node does.
	SignalAllocatableMemoryAvailable Signal = "allocatableMemory.available"
	signalContainerFsAvail           Signal = "containerfs.available"
	signalContainerFsInodes          Signal = "containerfs.inodesFree"
)

// known are the signals the agent measures. The kubelet's others are refused by name rather than
// accepted and never acted on.
func known(sig Signal) bool {
	switch sig {
	case SignalMemoryAvailable, SignalNodeFsAvailable, SignalNodeFsInodesFree,
		SignalImageFsAvailable, SignalImageFsInodesFree, SignalPIDAvailable,
		SignalAllocatableMemoryAvailable:
		return true
	}
	return false
}

// Threshold is one "signal<value" rule. Exactly one of Quantity and Percentage is set.
type Threshold struct {
	Signal     Signal
	Quantity   *resource.Quantity
	Percentage float64 // of the signal's capacity, in (0, 1]
	// GracePeriod is how long a soft threshold must hold before it evicts; 0 marks a hard one.
	GracePeriod time.Duration
	// MinReclaim is how far below the threshold eviction goes once it started.
	MinReclaimQuantity   *resource.Quantity
	MinReclaimPercentage float64
}

func (t Threshold) hard() bool { return t.GracePeriod == 0 }

// value is the threshold in the signal's units for a signal whose capacity is capacity.
func (t Threshold) value(capacity int64) int64 {
	if t.Quantity != nil {
		return t.Quantity.Value()
	}
	return int64(t.Percentage * float64(capacity))
}

func (t Threshold) minReclaim(capacity int64) int64 {
	if t.MinReclaimQuantity != nil {
		return t.MinReclaimQuantity.Value()
	}
	return int64(t.MinReclaimPercentage * float64(capacity))
}

// DefaultEvictionHard is the kubelet's default --eviction-hard on Linux.
func DefaultEvictionHard() map[string]string {
	return map[string]string{
		string(SignalMemoryAvailable):   "100Mi",
		string(SignalNodeFsAvailable):   "10%",
		string(SignalNodeFsInodesFree):  "5%",
		string(SignalImageFsAvailable):  "15%",
		string(SignalImageFsInodesFree): "5%",
	}
}

// ParseMap reads the kubelet's flag form of thresholds, "memory.available<100Mi,nodefs.available<10%",
// into the KubeletConfiguration's map form. "" is an empty map.
func ParseMap(s string, op string) (map[string]string, error) {
	out := map[string]string{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, op)
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("%q: want signal%svalue", part, op)
		}
		out[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return out, nil
}

// FormatMap is ParseMap's inverse, sorted for stable output.
func FormatMap(m map[string]string, op string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+op+m[k])
	}
	return strings.Join(parts, ",")
}

// Settings are the eviction fields of a KubeletConfiguration, in its map forms.
type Settings struct {
	Hard, Soft, SoftGracePeriod, MinimumReclaim map[string]string
}

// ParseThresholds turns the settings into thresholds as the kubelet does: every soft threshold needs
// a positive grace period, grace periods and minimum reclaims name signals that have a threshold,
// values are quantities (not negative) or percentages in [0%, 100%], and a zero value disables the
// threshold. Errors name the field.
func ParseThresholds(s Settings) ([]Threshold, error) {
	var errs []error
	var out []Threshold
	parse := func(field string, m map[string]string, soft bool) {
		for _, k := range sortedKeys(m) {
			sig := Signal(k)
			if err := checkSignal(sig); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", field, err))
				continue
			}
			t := Threshold{Signal: sig}
			q, pct, err := parseValue(m[k])
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %s: %w", field, k, err))
				continue
			}
			t.Quantity, t.Percentage = q, pct
			if soft {
				g, ok := s.SoftGracePeriod[k]
				if !ok {
					errs = append(errs, fmt.Errorf("evictionSoftGracePeriod: soft threshold %s has no grace period", k))
					continue
				}
				d, err := time.ParseDuration(g)
				if err != nil || d <= 0 {
					errs = append(errs, fmt.Errorf("evictionSoftGracePeriod: %s: %q is not a positive duration", k, g))
					continue
				}
				t.GracePeriod = d
			}
			if (q != nil && q.IsZero()) || (q == nil && pct == 0) {
				continue // the kubelet's way to switch a default threshold off
			}
			out = append(out, t)
		}
	}
	parse("evictionHard", s.Hard, false)
	parse("evictionSoft", s.Soft, true)
	for _, k := range sortedKeys(s.SoftGracePeriod) {
		if _, ok := s.Soft[k]; !ok {
			if err := checkSignal(Signal(k)); err != nil {
				errs = append(errs, fmt.Errorf("evictionSoftGracePeriod: %w", err))
			} else {
				errs = append(errs, fmt.Errorf("evictionSoftGracePeriod: %s has no soft threshold", k))
			}
		}
	}
	for _, k := range sortedKeys(s.MinimumReclaim) {
		if err := checkSignal(Signal(k)); err != nil {
			errs = append(errs, fmt.Errorf("evictionMinimumReclaim: %w", err))
			continue
		}
		q, pct, err := parseValue(s.MinimumReclaim[k])
		if err != nil {
			errs = append(errs, fmt.Errorf("evictionMinimumReclaim: %s: %w", k, err))
			continue
		}
		for i := range out {
			if out[i].Signal == Signal(k) {
				out[i].MinReclaimQuantity, out[i].MinReclaimPercentage = q, pct
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// WithAllocatable completes thresholds as the kubelet does when the pods' cgroup is capped
// (enforceNodeAllocatable has pods): each hard memory.available threshold also applies to
// allocatableMemory.available. Without that cap the signal has nothing to be measured against, so
// a threshold on it is refused rather than never met.
func WithAllocatable(ts []Threshold, podsCapped bool) ([]Threshold, error) {
	out := append([]Threshold{}, ts...)
	for _, t := range ts {
		if t.Signal == SignalAllocatableMemoryAvailable && !podsCapped {
			return nil, fmt.Errorf("eviction threshold %s needs enforceNodeAllocatable to include pods "+
				"(the pods' cgroup memory limit it is measured against)", t.Signal)
		}
	}
	if !podsCapped {
		return out, nil
	}
	for _, t := range ts {
		if t.Signal == SignalMemoryAvailable && t.hard() {
			a := t
			a.Signal = SignalAllocatableMemoryAvailable
			if !slices.ContainsFunc(out, func(o Threshold) bool { return keyOf(o) == keyOf(a) }) {
				out = append(out, a)
			}
		}
	}
	return out, nil
}

func checkSignal(sig Signal) error {
	if known(sig) {
		return nil
	}
	switch sig {
	case signalContainerFsAvail, signalContainerFsInodes:
		return fmt.Errorf("eviction signal %s is not supported by this agent", sig)
	}
	return fmt.Errorf("unknown eviction signal %q", sig)
}

func parseValue(v string) (*resource.Quantity, float64, error) {
	if p, ok := strings.CutSuffix(v, "%"); ok {
		f, err := strconv.ParseFloat(p, 64)
		if err != nil || f < 0 || f > 100 {
			return nil, 0, fmt.Errorf("%q: want a percentage from 0%% to 100%%", v)
		}
		return nil, f / 100, nil
	}
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return nil, 0, fmt.Errorf("%q: not a quantity: %w", v, err)
	}
	if q.Sign() < 0 {
		return nil, 0, fmt.Errorf("%q: must not be negative", v)
	}
	return &q, 0, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

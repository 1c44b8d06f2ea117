package oci

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// GvisorStats is what `runsc events --stats` reports of one container. CPU is the container's
// own; memory is the whole sandbox's (runsc of this era accounts memory per Sentry, not per
// container); pids counts the sandbox's tasks.
type GvisorStats struct {
	CPUUsageNanos uint64
	MemoryUsage   uint64
	MemoryLimit   uint64
	Pids          uint64
}

type gvisorEvent struct {
	Type string `json:"type"`
	Data struct {
		CPU struct {
			Usage struct {
				Total uint64 `json:"total"`
			} `json:"usage"`
		} `json:"cpu"`
		Memory struct {
			Usage struct {
				Usage uint64 `json:"usage"`
				Limit uint64 `json:"limit"`
			} `json:"usage"`
		} `json:"memory"`
		Pids struct {
			Current uint64 `json:"current"`
		} `json:"pids"`
	} `json:"data"`
}

// ParseGvisorStats reads the output of `runsc events --stats ID`.
func ParseGvisorStats(out []byte) (*GvisorStats, error) {
	var ev gvisorEvent
	if err := json.Unmarshal(bytes.TrimSpace(out), &ev); err != nil {
		return nil, fmt.Errorf("runsc events: %w", err)
	}
	if ev.Type != "stats" {
		return nil, fmt.Errorf("runsc events: event type %q, want stats", ev.Type)
	}
	return &GvisorStats{
		CPUUsageNanos: ev.Data.CPU.Usage.Total,
		MemoryUsage:   ev.Data.Memory.Usage.Usage,
		MemoryLimit:   ev.Data.Memory.Usage.Limit,
		Pids:          ev.Data.Pids.Current,
	}, nil
}

// GvisorStats asks runsc for a container's figures; statsTimeout bounds the call.
func (r *Runtime) GvisorStats(ctx context.Context, id string) (*GvisorStats, error) {
	ctx, cancel := context.WithTimeout(ctx, statsTimeout)
	defer cancel()
	out, err := r.run(ctx, nil, "events", "--stats", id)
	if err != nil {
		return nil, err
	}
	return ParseGvisorStats(out)
}

// statsTimeout bounds one `runsc events --stats`: a stats call must not hang the summary.
const statsTimeout = 10 * time.Second

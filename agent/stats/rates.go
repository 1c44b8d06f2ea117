package stats

import (
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// fillRates gives pods and containers a CPU rate (UsageNanoCores) when the runtime reports only
// the cumulative usage (containerd 1.6 does), from the previous Summary's samples.
func (p *Provider) fillRates(pods []statsapi.PodStats) {
	p.mu.Lock()
	defer p.mu.Unlock()
	next := make(map[string]cpuSample, len(p.lastPods))
	rate := func(key string, cpu *statsapi.CPUStats) {
		if cpu == nil || cpu.UsageCoreNanoSeconds == nil {
			return
		}
		cur := cpuSample{at: cpu.Time.Time, usage: *cpu.UsageCoreNanoSeconds}
		next[key] = cur
		if cpu.UsageNanoCores != nil {
			return
		}
		prev, ok := p.lastPods[key]
		// A lower count means a new container under the same name: no rate until the next sample.
		if !ok || !cur.at.After(prev.at) || cur.usage < prev.usage {
			return
		}
		r := uint64(float64(cur.usage-prev.usage) / cur.at.Sub(prev.at).Seconds())
		cpu.UsageNanoCores = &r
	}
	for i := range pods {
		ps := &pods[i]
		rate(ps.PodRef.UID, ps.CPU)
		for j := range ps.Containers {
			rate(ps.PodRef.UID+"/"+ps.Containers[j].Name, ps.Containers[j].CPU)
		}
	}
	p.lastPods = next
}

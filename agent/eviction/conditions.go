package eviction

import (
	v1 "k8s.io/api/core/v1"
)

func conditionOf(s Signal) v1.NodeConditionType {
	switch s {
	case SignalMemoryAvailable, SignalAllocatableMemoryAvailable:
		return v1.NodeMemoryPressure
	case SignalPIDAvailable:
		return v1.NodePIDPressure
	}
	return v1.NodeDiskPressure
}

func resourceOf(s Signal) v1.ResourceName {
	switch s {
	case SignalMemoryAvailable, SignalAllocatableMemoryAvailable:
		return v1.ResourceMemory
	case SignalPIDAvailable:
		return "pids"
	}
	return v1.ResourceEphemeralStorage
}

// thresholdsMet are those of ts the observations cross; with minReclaim, the level to cross is
// raised by the threshold's minimum reclaim (how the kubelet keeps evicting until it is reached).
// NodeConditions are the pressure conditions the node reports (no times: node status keeps those):
// those whose signals the last pass read.
func (m *Manager) NodeConditions() []v1.NodeCondition {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []v1.NodeCondition
	cond := func(t v1.NodeConditionType, yesReason, yesMsg, noReason, noMsg string) {
		switch {
		case !m.observed[t]:
		case m.conditions[t]:
			out = append(out, v1.NodeCondition{Type: t, Status: v1.ConditionTrue, Reason: yesReason, Message: yesMsg})
		default:
			out = append(out, v1.NodeCondition{Type: t, Status: v1.ConditionFalse, Reason: noReason, Message: noMsg})
		}
	}
	cond(v1.NodeMemoryPressure, reasonMemoryPressure, messageMemoryPressure, reasonMemoryOK, messageMemoryOK)
	cond(v1.NodeDiskPressure, reasonDiskPressure, messageDiskPressure, reasonDiskOK, messageDiskOK)
	cond(v1.NodePIDPressure, reasonPIDPressure, messagePIDPressure, reasonPIDOK, messagePIDOK)
	return out
}

func (m *Manager) has(c v1.NodeConditionType) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.conditions[c]
}

// IsUnderMemoryPressure reports the MemoryPressure condition.
func (m *Manager) IsUnderMemoryPressure() bool { return m.has(v1.NodeMemoryPressure) }

// IsUnderDiskPressure reports the DiskPressure condition.
func (m *Manager) IsUnderDiskPressure() bool { return m.has(v1.NodeDiskPressure) }

// IsUnderPIDPressure reports the PIDPressure condition.
func (m *Manager) IsUnderPIDPressure() bool { return m.has(v1.NodePIDPressure) }

package csi

import (
	"os"
	"path/filepath"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/agent/internal/podpath"
)

// uniqueName is the kubelet's unique name of a CSI volume, as the Node's volumesInUse and
// volumesAttached list it: the plugin's name, then driver^handle.
func uniqueName(driver, handle string) v1.UniqueVolumeName {
	return v1.UniqueVolumeName(PluginName + "/" + driver + "^" + handle)
}

// markInUse records that the pod uses an attachable volume; a volume its driver does not attach
// is unmarked (reconstruction marked every volume it found, not knowing).
func (m *Manager) markInUse(uid types.UID, name v1.UniqueVolumeName, attachable bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	vols := m.inUse[uid]
	if !attachable {
		delete(vols, name)
		return
	}
	if vols == nil {
		vols = map[v1.UniqueVolumeName]bool{}
		m.inUse[uid] = vols
	}
	vols[name] = true
}

// released forgets the pod's volumes once its teardown is done.
func (m *Manager) released(uid types.UID) {
	m.mu.Lock()
	delete(m.inUse, uid)
	m.mu.Unlock()
}

// VolumesInUse are the node's status.volumesInUse: the attachable volumes of the pods it has
// not finished tearing down, sorted. The attach/detach controller does not detach a volume the
// node lists, so a volume is listed from before its attachment is waited for until its pod's
// unpublish (and unstage) are done.
func (m *Manager) VolumesInUse() []v1.UniqueVolumeName {
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := map[v1.UniqueVolumeName]bool{}
	var out []v1.UniqueVolumeName
	for _, vols := range m.inUse {
		for name := range vols {
			if !seen[name] {
				seen[name] = true
				out = append(out, name)
			}
		}
	}
	slices.Sort(out)
	return out
}

// reconstruct marks in use every volume a pod folder publishes (as its vol_data.json says, or
// its block volumes' marks), so
// that an agent restarted with volumes in place lists them before its pods are synced again.
// Whether a driver attaches is not known without asking the API; the kubelet assumes it does
// when it cannot tell, and the pod's next set up corrects it.
func (m *Manager) reconstruct() {
	pods, err := os.ReadDir(filepath.Join(m.cfg.RootDir, "pods"))
	if err != nil {
		return
	}
	for _, p := range pods {
		if marks, err := m.podBlockDir(types.UID(p.Name())); err == nil {
			ents, _ := os.ReadDir(marks)
			for _, e := range ents {
				if podpath.Element("PV name", e.Name()) != nil {
					continue
				}
				if d, err := loadVolData(m.blockDir(e.Name(), "data")); err == nil && validDriver(d.DriverName) == nil && d.VolumeHandle != "" {
					m.markInUse(types.UID(p.Name()), uniqueName(d.DriverName, d.VolumeHandle), true)
				}
			}
		}
		dir, err := podpath.PluginDir(m.cfg.RootDir, types.UID(p.Name()), "kubernetes.io~csi")
		if err != nil {
			continue
		}
		vols, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, v := range vols {
			d, err := loadVolData(filepath.Join(dir, v.Name()))
			if err != nil || validDriver(d.DriverName) != nil || d.VolumeHandle == "" {
				continue
			}
			m.markInUse(types.UID(p.Name()), uniqueName(d.DriverName, d.VolumeHandle), true)
		}
	}
}

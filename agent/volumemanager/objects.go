package volumemanager

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/nodelet/nodelet/agent/manifest"
)

// DirObjects serves ConfigMaps and Secrets placed beside the static pod manifests, so a standalone
// agent (no apiserver) runs pods whose volumes and env name them. Every .yaml, .yml and .json file
// of Dir is read (multi-document YAML too); documents of other kinds are skipped, as they are the
// pod source's business. Reads are per call, so an edited object shows at the next sync, and the
// volume is then updated in place.
type DirObjects struct {
	Dir string
}

type objects struct {
	configMaps map[string]*v1.ConfigMap
	secrets    map[string]*v1.Secret
}

func (d *DirObjects) load() (*objects, error) {
	o := &objects{configMaps: map[string]*v1.ConfigMap{}, secrets: map[string]*v1.Secret{}}
	st, err := os.Stat(d.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return o, nil
	}
	if err != nil {
		return nil, err
	}
	// The manifest path may be one file rather than a folder, as with the kubelet.
	paths := []string{d.Dir}
	if st.IsDir() {
		entries, err := os.ReadDir(d.Dir)
		if err != nil {
			return nil, err
		}
		paths = paths[:0]
		for _, e := range entries {
			ext := filepath.Ext(e.Name())
			if e.IsDir() || strings.HasPrefix(e.Name(), ".") || (ext != ".yaml" && ext != ".yml" && ext != ".json") {
				continue
			}
			paths = append(paths, filepath.Join(d.Dir, e.Name()))
		}
	}
	for _, p := range paths {
		// The same bounded, non-blocking read as the pod source's: a FIFO or a link to /dev/zero
		// in the folder must not wedge or grow a pod's sync either.
		b, err := manifest.Read(p)
		if err != nil {
			continue // removed meanwhile, or refused (the pod source reports it)
		}
		// The pod source's own splitting: each document keeps its last line break, which a
		// value ending it (a block scalar before "---") would otherwise lose. A file that fails to
		// split past some document is reported by the pod source; what came before still counts.
		docs, _, _ := manifest.Documents(b)
		for _, doc := range docs {
			js, err := yaml.YAMLToJSON(doc)
			if err != nil {
				continue // the pod source reports bad manifests
			}
			var tm metav1.TypeMeta
			if json.Unmarshal(js, &tm) != nil || tm.APIVersion != "v1" {
				continue
			}
			switch tm.Kind {
			case "ConfigMap":
				cm := &v1.ConfigMap{}
				if json.Unmarshal(js, cm) == nil && cm.Name != "" {
					o.configMaps[key(cm.Namespace, cm.Name)] = cm
				}
			case "Secret":
				s := &v1.Secret{}
				if json.Unmarshal(js, s) == nil && s.Name != "" {
					// stringData is write-only on the apiserver, merged into data; here too.
					for k, v := range s.StringData {
						if s.Data == nil {
							s.Data = map[string][]byte{}
						}
						s.Data[k] = []byte(v)
					}
					s.StringData = nil
					o.secrets[key(s.Namespace, s.Name)] = s
				}
			}
		}
	}
	return o, nil
}

func key(ns, name string) string {
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	return ns + "/" + name
}

// ConfigMap returns the named ConfigMap, or an apiserver-style NotFound error.
func (d *DirObjects) ConfigMap(_ context.Context, namespace, name string) (*v1.ConfigMap, error) {
	o, err := d.load()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", d.Dir, err)
	}
	if cm, ok := o.configMaps[key(namespace, name)]; ok {
		return cm, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
}

// Secret returns the named Secret, or an apiserver-style NotFound error.
func (d *DirObjects) Secret(_ context.Context, namespace, name string) (*v1.Secret, error) {
	o, err := d.load()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", d.Dir, err)
	}
	if s, ok := o.secrets[key(namespace, name)]; ok {
		return s, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
}

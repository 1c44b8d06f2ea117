package manifest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Documents splits data into its YAML documents at "---" lines, each exactly as written, its
// last line break included: a block scalar (or any value) ending a document before "---" keeps
// the newline a YAML parser gives it. Empty and comment-only documents are left out; the number
// of each document in data is returned beside it for error messages.
func Documents(data []byte) (docs [][]byte, index []int, err error) {
	r := utilyaml.NewYAMLReader(bufioReader(data))
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, index, nil
		}
		if err != nil {
			return docs, index, fmt.Errorf("document %d: %w", i, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 || isOnlyComments(doc) {
			continue
		}
		docs, index = append(docs, doc), append(index, i)
	}
}

// Decode reads one or more YAML documents (or JSON), each a Pod or a PodList, as a manifest URL
// serves them: RuntimeClasses belong in the manifest folder only, where every pod sees the same ones.
func Decode(data []byte) ([]*v1.Pod, error) {
	pods, rcs, err := DecodeAll(data)
	if err != nil {
		return nil, err
	}
	if len(rcs) > 0 {
		return nil, fmt.Errorf("RuntimeClass %q: %w", rcs[0].Name, ErrRuntimeClassOutsideFolder)
	}
	return pods, nil
}

// ErrRuntimeClassOutsideFolder: a RuntimeClass where it would not be honoured (a manifest URL's
// body, or the folder of an agent in a cluster, whose RuntimeClasses are the apiserver's).
var ErrRuntimeClassOutsideFolder = errors.New("RuntimeClass objects are read only from the manifest folder of a standalone agent")

// DecodeAll reads one or more YAML documents (or JSON) of a manifest folder's file: Pods and PodLists,
// node.k8s.io/v1 RuntimeClasses (validated here, as they are not defaulted), and the ConfigMaps and
// Secrets the volume manager reads, which are skipped.
func DecodeAll(data []byte) ([]*v1.Pod, []*nodev1.RuntimeClass, error) {
	docs, index, err := Documents(data)
	if err != nil {
		return nil, nil, err
	}
	var pods []*v1.Pod
	var rcs []*nodev1.RuntimeClass
	for n, doc := range docs {
		i := index[n]
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &head); err != nil {
			return nil, nil, fmt.Errorf("document %d: %w", i, err)
		}
		if head.Kind == "RuntimeClass" {
			rc, err := decodeRuntimeClass(doc, head.APIVersion)
			if err != nil {
				return nil, nil, fmt.Errorf("document %d: %w", i, err)
			}
			rcs = append(rcs, rc)
			continue
		}
		if head.APIVersion != "" && head.APIVersion != "v1" {
			return nil, nil, fmt.Errorf("document %d: apiVersion %q, want v1", i, head.APIVersion)
		}
		switch head.Kind {
		case "Pod", "":
			p := &v1.Pod{}
			if err := yaml.Unmarshal(doc, p); err != nil {
				return nil, nil, fmt.Errorf("document %d: %w", i, err)
			}
			pods = append(pods, p)
		case "PodList", "List":
			l := &v1.PodList{}
			if err := yaml.Unmarshal(doc, l); err != nil {
				return nil, nil, fmt.Errorf("document %d: %w", i, err)
			}
			for j := range l.Items {
				pods = append(pods, &l.Items[j])
			}
		case "ConfigMap", "Secret":
			// Standalone pods' configMap and secret volumes read these from the manifest folder
			// (the volume manager); they are not pods, nor errors.
			continue
		default:
			return nil, nil, fmt.Errorf("document %d: kind %q, want Pod, PodList, RuntimeClass, ConfigMap or Secret", i, head.Kind)
		}
	}
	return pods, rcs, nil
}

func isOnlyComments(doc []byte) bool {
	for _, line := range bytes.Split(doc, []byte("\n")) {
		l := bytes.TrimSpace(line)
		if len(l) > 0 && l[0] != '#' && !bytes.Equal(l, []byte("---")) {
			return false
		}
	}
	return true
}

func bufioReader(data []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(data)) }

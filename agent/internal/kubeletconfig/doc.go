// Package kubeletconfig is the KubeletConfiguration file format (kubelet.config.k8s.io/v1beta1)
// as the agent decodes it: types of the same names and JSON shape as k8s.io/kubelet's, generated
// from that type by reflection (types_gen.go; its test fails when they part), so that the binary
// does not link k8s.io/kubelet. That package's logging and tracing fields are component-base's
// types, and importing them links component-base's feature gates and legacy metrics registry,
// whose inits ran in every mode of nodelet (`nodelet runtime` included) for a file only the agent
// reads. The few constants the agent compares against are declared in consts.go.
package kubeletconfig

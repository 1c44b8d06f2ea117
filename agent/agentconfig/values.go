package agentconfig

import (
	"encoding/csv"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/agent/eviction"
)

// The flag Values pflag has no type for: fields of the file format that are int32 where the flag
// has always been an int, optional (pointer) fields, and the kubelet's spellings of maps and
// taints. Written here because component-base's cliflag may not be linked (cmd/nodelet/deps_test.go).

// laterError is a flag value's error that Config reports, as it reports the file's, rather than
// the command line's parser: the eviction maps, the taints.
type laterError struct{ error }

// int32Flag is an int32 field under the flag type "int".
type int32Flag struct{ p *int32 }

func (v int32Flag) Set(s string) error {
	n, err := strconv.ParseInt(s, 0, 32)
	if err != nil {
		return err
	}
	*v.p = int32(n)
	return nil
}
func (v int32Flag) String() string { return strconv.Itoa(int(*v.p)) }
func (v int32Flag) Type() string   { return "int" }

// optional is a flag over an optional (pointer) field: Set allocates, so values the field shared
// with the defaults are never written through.
type optional[T any] struct {
	p     **T
	typ   string
	parse func(string) (T, error)
}

func (v optional[T]) Set(s string) error {
	x, err := v.parse(s)
	if err != nil {
		return err
	}
	*v.p = &x
	return nil
}

func (v optional[T]) String() string {
	if *v.p == nil {
		var zero T
		return fmt.Sprint(zero)
	}
	return fmt.Sprint(**v.p)
}

func (v optional[T]) Type() string { return v.typ }

func optBool(fs *pflag.FlagSet, p **bool, name, usage string) {
	fs.Var(optional[bool]{p, "bool", strconv.ParseBool}, name, usage)
	fs.Lookup(name).NoOptDefVal = "true"
}

func optString(fs *pflag.FlagSet, p **string, name, usage string) {
	fs.Var(optional[string]{p, "string", func(s string) (string, error) { return s, nil }}, name, usage)
}

// optInt32 is an optional int32 field; typ is the flag type it has always had ("int" or "int32").
func optInt32(fs *pflag.FlagSet, p **int32, typ, name, usage string) {
	fs.Var(optional[int32]{p, typ, func(s string) (int32, error) {
		n, err := strconv.ParseInt(s, 0, 32)
		return int32(n), err
	}}, name, usage)
}

func optInt64(fs *pflag.FlagSet, p **int64, name, usage string) {
	fs.Var(optional[int64]{p, "int64", func(s string) (int64, error) { return strconv.ParseInt(s, 0, 64) }}, name, usage)
}

// qpsFlag is --kube-api-qps: a float, as nodelet's flag has always been, so fractions reach the
// client (Options.KubeAPIQPS); kubeAPIQPS, an int32 in the file format, gets its whole part.
type qpsFlag struct {
	kc **int32
	f  *float32
}

func (v qpsFlag) Set(s string) error {
	f, err := strconv.ParseFloat(s, 32)
	if err != nil {
		return err
	}
	q := int32(float32(f))
	*v.f, *v.kc = float32(f), &q
	return nil
}
func (v qpsFlag) String() string { return strconv.FormatFloat(float64(*v.f), 'g', -1, 32) }
func (v qpsFlag) Type() string   { return "float32" }

// evictionMap is an eviction flag in the kubelet's form ("memory.available<100Mi,…" with op "<",
// "signal=value,…" with op "="); each Set replaces the whole map.
type evictionMap struct {
	p        *map[string]string
	name, op string
}

func (v evictionMap) Set(s string) error {
	m, err := eviction.ParseMap(s, v.op)
	if err != nil {
		return laterError{fmt.Errorf("--%s: %w", v.name, err)}
	}
	*v.p = m
	return nil
}
func (v evictionMap) String() string { return eviction.FormatMap(*v.p, v.op) }
func (v evictionMap) Type() string   { return "string" }

// taints is --register-with-taints: comma-separated key=value:Effect or key:Effect, accumulated
// over repeated flags as a string slice is.
type taints struct {
	p       *[]v1.Taint
	changed bool
}

func (v *taints) Set(s string) error {
	specs := []string{}
	if s != "" {
		var err error
		if specs, err = csv.NewReader(strings.NewReader(s)).Read(); err != nil {
			return err
		}
	}
	ts, err := parseTaints(specs)
	if err != nil {
		return laterError{err}
	}
	if v.changed {
		ts = append(*v.p, ts...)
	}
	*v.p, v.changed = ts, true
	return nil
}

func (v *taints) String() string {
	s := make([]string, len(*v.p))
	for i, t := range *v.p {
		s[i] = t.Key
		if t.Value != "" {
			s[i] += "=" + t.Value
		}
		s[i] += ":" + string(t.Effect)
	}
	return "[" + strings.Join(s, ",") + "]"
}

func (v *taints) Type() string { return "stringSlice" }

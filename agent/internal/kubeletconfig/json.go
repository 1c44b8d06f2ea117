package kubeletconfig

import (
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TimeOrMetaDuration is logging's flushFrequency: a duration string ("5s") or, as older files
// wrote it, an integer number of nanoseconds. Either decodes; it encodes back the way it came.
type TimeOrMetaDuration struct {
	Duration metav1.Duration
	// AsString: the value was (or is to be written as) a duration string.
	AsString bool `json:"-"`
}

func (d *TimeOrMetaDuration) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		d.AsString = true
		return d.Duration.UnmarshalJSON(b)
	}
	d.AsString = false
	if err := json.Unmarshal(b, &d.Duration.Duration); err != nil {
		return fmt.Errorf("duration %s: neither a string nor nanoseconds: %w", b, err)
	}
	return nil
}

func (d TimeOrMetaDuration) MarshalJSON() ([]byte, error) {
	if d.AsString {
		return d.Duration.MarshalJSON()
	}
	return json.Marshal(int64(d.Duration.Duration))
}

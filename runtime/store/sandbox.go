package store

// Sandbox is the persisted record of a pod sandbox.
type Sandbox struct {
	ID string `json:"id"`
}

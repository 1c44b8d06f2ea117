package store

// Container is the persisted record of a container.
type Container struct {
	ID string `json:"id"`
}

// Package badtest is correct; only its darwin+cgo test is not.
package badtest

// Name is the item's name.
const Name = "x"

//go:build !(darwin && cgo)

package good

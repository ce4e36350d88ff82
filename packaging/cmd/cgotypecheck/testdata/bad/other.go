//go:build !(darwin && cgo)

package bad

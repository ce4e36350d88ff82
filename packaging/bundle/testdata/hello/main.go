// Command hello is a tiny darwin binary for the bundle tests.
package main

func main() { println("hello") }

// Command hello is the binary cmdtest's own tests build.
package main

import "fmt"

func main() { fmt.Println("hello from a built binary") }

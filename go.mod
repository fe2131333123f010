module github.com/uetrace/uetrace

go 1.26.0

require (
	github.com/google/go-cmp v0.7.0
	github.com/spf13/cobra v1.10.2
	github.com/spf13/pflag v1.0.9
	golang.org/x/sys v0.49.0
	google.golang.org/protobuf v1.36.12
	pgregory.net/rapid v1.3.0
)

require github.com/inconshreveable/mousetrap v1.1.0 // indirect

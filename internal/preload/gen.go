package preload

//go:generate go run ./build

package efa

// ProviderName is the name this package registers with fabric.Register.
const ProviderName = "libfabric"

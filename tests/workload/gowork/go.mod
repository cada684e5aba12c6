module fleetprof/gowork

go 1.19

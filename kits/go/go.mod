module sluice.example/kits/go

go 1.21

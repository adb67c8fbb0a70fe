module kernelevolve.example/evolve

go 1.19

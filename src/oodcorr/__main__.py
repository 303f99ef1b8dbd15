from oodcorr.cli import main

main()

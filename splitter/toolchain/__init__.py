"""What builds and emulates firmware: arm-none-eabi-gcc through the generated Makefiles, and
QEMU boards over real (pseudo-)serial endpoints."""

"""Pure, pandas-free parsers of scheduler command output (Slurm, PBS Pro/OpenPBS, Torque).

Everything here turns recorded text into plain Python values; nothing runs a command
and nothing imports pandas, so status polling on a login node stays light.
"""

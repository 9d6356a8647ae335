// How every `sluice` command ends, for scripts: 0 done, 1 failed doing it (Sluice refused, nothing
// answered, a start that failed), 2 its command line or configuration refused before anything was
// done (an unknown command or option, a value missing or out of range, an argument the client kit
// would not send). The README's CLI section says the same.

export const EXIT_FAILED = 1;
export const EXIT_USAGE = 2;

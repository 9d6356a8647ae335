// How tests fill a "disk": a command run under a file-size limit (`ulimit -f`, in KiB) with
// SIGXFSZ ignored (exec keeps that), so a write past the limit fails with EFBIG, as one on a full
// disk fails with ENOSPC, instead of killing the process.

/** bash's arguments (`spawn('bash', …)`) that exec `command` under a `kib` file-size limit. */
export const underFileSizeLimit = (kib: number, command: readonly string[]): string[] =>
  ['-c', `trap '' XFSZ; ulimit -f ${kib}; exec "$@"`, 'bash', ...command];

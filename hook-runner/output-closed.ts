// Output nobody reads any more: writes to stdout or stderr once its reader is gone (`| head`, a
// closed terminal, a log shipper that restarted) fail with EPIPE, emitted as an error event, which
// without a listener ends the process at its next line, with no shutdown. The runtime's commands
// and the hook-runner go on, their lines unread.

/** Keeps EPIPE on `output` from ending the process; `onClosed` hears of it once. Other write errors still end the process. */
export function whenOutputCloses(output: NodeJS.WriteStream, onClosed: () => void = () => undefined): void {
  let told = false;
  output.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EPIPE') throw error;
    if (!told) onClosed();
    told = true;
  });
}

# frozen_string_literal: true

# Stopping a server child process (redis-server, solid-engine-server) the
# same way everywhere in the suite: a signal, then reaping it.
module ServerProcess
  def stop(signal = "TERM")
    return unless @pid

    Process.kill(signal, @pid)
    # A paused server would never act on the signal.
    Process.kill("CONT", @pid) if @paused
    Process.wait(@pid)
  rescue Errno::ESRCH, Errno::ECHILD
    nil
  ensure
    @pid = nil
    @paused = false
  end

  # SIGSTOP: the server keeps its sockets, the kernel still accepts new
  # connections into the listen backlog, and nothing is ever answered (a
  # hung server). `resume` (SIGCONT) lets it read what was sent meanwhile.
  def pause
    Process.kill("STOP", @pid)
    @paused = true
  end

  def resume
    return unless @pid && @paused

    Process.kill("CONT", @pid)
    @paused = false
  end

  def kill = stop("KILL")
  def running? = !@pid.nil?
end

# frozen_string_literal: true

# Stopping a server child process (redis-server, solid-engine-server) the
# same way everywhere in the suite: a signal, then reaping it.
module ServerProcess
  def stop(signal = "TERM")
    return unless @pid

    Process.kill(signal, @pid)
    Process.wait(@pid)
  rescue Errno::ESRCH, Errno::ECHILD
    nil
  ensure
    @pid = nil
  end

  def kill = stop("KILL")
  def running? = !@pid.nil?
end

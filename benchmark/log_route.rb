# frozen_string_literal: true

# What a log line costs, straight to stderr and through `config.logger`
# (docs/operations.md, "Logs"): two worker Ractors each write LOG_LINES / 2
# debug lines with a job's fields, and the figures are lines per second and
# CPU microseconds per line for the whole process (the draining thread
# included).
#
#   bundle exec ruby benchmark/log_route.rb [text|json] 2>/dev/null
#
# stderr is where the plain lines go: send it to /dev/null (or a file) so
# the terminal does not set the pace.

require_relative "../lib/solid_jobs"
require "logger"
require "tmpdir"

Warning[:experimental] = false
LINES = Integer(ENV.fetch("LOG_LINES", "100000"))

def measure(label)
  wall = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  cpu = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)
  ractors = Array.new(2) do |r|
    SolidJobs::RactorCompat.spawn(r + 1, LINES / 2, name: "log-route-#{r + 1}") do |worker_id, n|
      n.times do
        SolidJobs::Log.debug("finished", worker_id: worker_id, job_id: "0b6f3c1e-1111-2222-3333-444455556666",
                                         task: "NoopTask", channel: "default", event: "job.completed", duration_ms: 0.012)
      end
      :done
    end
  end
  ractors.each { |r| SolidJobs::RactorCompat.join(r) }
  SolidJobs::Log.flush if SolidJobs::Log.logger
  wall = Process.clock_gettime(Process::CLOCK_MONOTONIC) - wall
  cpu = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID) - cpu
  $stdout.puts format("%-32s %9.0f lines/s  %5.2f us CPU/line", label, LINES / wall, cpu / LINES * 1e6)
end

format_name = ARGV.fetch(0, "text")
SolidJobs.configure do |c|
  c.log_level = :debug
  c.log_format = format_name
end
measure("stderr (#{format_name})")
SolidJobs.configure { |c| c.logger = Logger.new(File::NULL) }
measure("config.logger Logger(File::NULL)")
Dir.mktmpdir do |dir|
  SolidJobs.configure { |c| c.logger = Logger.new(File.join(dir, "app.log")) }
  measure("config.logger Logger(file)")
  SolidJobs.configure { |c| c.logger = nil }
end

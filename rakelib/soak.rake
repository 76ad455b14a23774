# frozen_string_literal: true

# Opt-in: a soak holds a worker under load for ten minutes per backend by
# default, too long for `rake test` or a casual `rake -T` user to trip over.
desc "Soak: steady load on a solid-jobs worker for SOLID_JOBS_SOAK_SECONDS (600); " \
     "fails on lost jobs or memory growth (SOLID_JOBS_SOAK=1)"
task :soak do
  unless ENV["SOLID_JOBS_SOAK"] == "1"
    puts "The soak test is off. It runs SOLID_JOBS_SOAK_SECONDS (default 600) of steady load per backend; enable it with:",
         "  SOLID_JOBS_SOAK=1 SOLID_JOBS_SOAK_SECONDS=600 bundle exec rake soak",
         "Other settings (SOLID_JOBS_SOAK_RATE, _INTERVAL, _CONCURRENCY, _BACKENDS, _SMOKE, _OUTPUT_DIR): see benchmark/soak.rb."
    next
  end

  Rake::Task[:compile].invoke
  # The engine server is needed only when a soak runs against it.
  Rake::Task["engine:build"].invoke if ENV.fetch("SOLID_JOBS_SOAK_BACKENDS", "").include?("engine")
  ruby "benchmark/soak.rb"
end

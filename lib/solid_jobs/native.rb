# frozen_string_literal: true

# The compiled extension: `rake compile` (or `gem install`) puts it here.
begin
  require "solid_jobs/solid_jobs"
rescue LoadError => e
  raise LoadError, "the SolidJobs native extension is not built (#{e.message}); run `bundle exec rake compile`"
end

# frozen_string_literal: true

# The compiled extension. A platform gem (`rake native:gem`) ships one per
# Ruby ABI in lib/solid_jobs/<major.minor>/; a source gem's `gem install`,
# and `rake compile` in a checkout, put the one for this Ruby in
# lib/solid_jobs/.
begin
  require "solid_jobs/#{RUBY_VERSION[/\A\d+\.\d+/]}/solid_jobs"
rescue LoadError
  begin
    require "solid_jobs/solid_jobs"
  rescue LoadError => e
    raise LoadError, "the SolidJobs native extension is not built for Ruby #{RUBY_VERSION} (#{e.message}); " \
                     "in a checkout run `bundle exec rake compile`, else reinstall the gem"
  end
end
